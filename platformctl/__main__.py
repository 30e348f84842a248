from platformctl.cli import main

raise SystemExit(main())
