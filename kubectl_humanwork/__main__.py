"""`python -m kubectl_humanwork`: the same as the `kubectl-humanwork` command."""

from kubectl_humanwork.main import main

raise SystemExit(main())
