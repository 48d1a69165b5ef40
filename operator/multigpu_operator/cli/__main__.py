"""`python -m multigpu_operator.cli`: the `mgj` command."""

import sys

from multigpu_operator.cli import main

sys.exit(main())
