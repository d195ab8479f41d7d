import sys

from amptui.cli.main import main

sys.exit(main())
