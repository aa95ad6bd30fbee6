"""`python -m platform_api.audit verify`."""

from platform_api.audit.cli import main

raise SystemExit(main())
