"""``python -m training.bench``: compiled vs eager training and inference."""

from training.bench.compile import main

raise SystemExit(main())
