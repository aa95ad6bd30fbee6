"""`python -m platform_api.audit verify|checkpoint`."""

from platform_api.audit.cli import main

raise SystemExit(main())
