"""``python -m speed_layer``: the speed layer's command line (:mod:`speed_layer.cli`)."""

from speed_layer.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
