import sys

from privacy_audit.audit.integrations.cli import main

sys.exit(main())
