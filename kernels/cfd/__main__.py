import sys

from launchtune.kernels.cfd.cli import main

sys.exit(main())
