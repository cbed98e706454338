"""Global memory planned by the compiler (Munksgaard's thesis, chapters 4-6): copies removed by
building arrays where they are copied to (copies.py), and arrays that never live at once sharing
a block (blocks.py); plan.py describes the result for the views."""
