"""`python -m agent_operator` runs the operator."""

from agent_operator.main import main

raise SystemExit(main())
