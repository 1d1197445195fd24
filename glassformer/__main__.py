"""``python -m glassformer ...``: the ``glassformer`` command (the workshop's training lab
starts its runs this way, with the server's own interpreter)."""

from glassformer.cli import main

raise SystemExit(main())
