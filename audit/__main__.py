import sys

from audit.integrations.cli import main

sys.exit(main())
