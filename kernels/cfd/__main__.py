import sys

from kernels.cfd.cli import main

sys.exit(main())
