"""`python -m platform_api.backup backup|restore|check`."""

from platform_api.backup.cli import main

raise SystemExit(main())
