"""``python -m privacy_audit ...``: the ``privacy-audit`` command."""

import sys

from privacy_audit.audit.cli import main

sys.exit(main())
