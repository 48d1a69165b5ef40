"""The `mgj` command line."""

from __future__ import annotations

import argparse
import sys

from multigpu_operator import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mgj", description="multigpu-operator tools")
    parser.add_argument("--version", action="version", version=f"mgj {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
