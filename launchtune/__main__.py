import sys

from launchtune.pipeline.cli import main

sys.exit(main())
