"""`python -m kiln info` runs the kiln program with the same arguments (exit status included)."""
from kiln._info import main

if __name__ == "__main__":
    main()
