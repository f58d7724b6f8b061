"""`python -m ctxpipe`."""

from ctxpipe.cli import main

main()
