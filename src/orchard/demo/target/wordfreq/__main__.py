"""`python3 -m wordfreq FILE`: print the report."""

import sys

from wordfreq.cli import main

sys.exit(main())
