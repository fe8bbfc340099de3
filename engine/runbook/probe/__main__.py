import sys

from runbook.probe import main

sys.exit(main())
