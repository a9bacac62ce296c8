import sys

from privacy_audit.audit.cli import main

sys.exit(main())
