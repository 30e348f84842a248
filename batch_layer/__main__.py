"""``python -m batch_layer STEP``: one step of a batch pipeline (what each DAG task runs),
or ``python -m batch_layer serve``, the step server. The command line is
:mod:`batch_layer.cli`, the steps :mod:`batch_layer.steps`; nothing imports this module,
the application ``spark-submit`` runs on a cluster.
"""

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:  # the long-running step server
        from batch_layer.server_http import main as serve

        sys.exit(serve(sys.argv[2:]))
    from batch_layer.cli import main

    sys.exit(main())
