"""`python -m agent_image` runs the agent."""

from agent_image.main import main

raise SystemExit(main())
