"""The order in which `reduceRows` and `scanRows` combine a row's elements, shared by both back
ends so that they print the same bits for an operator that is only associative (a sum of
doubles).

The rows' concatenation is cut into tiles of ROW_TILE elements. A row's first piece (its
elements in the tile where it begins) is folded from the neutral value, left to right; each
later tile's piece is folded on its own (from its first element), and the row's running value
is combined with it: f(f(fold z first, piece2), piece3)... A row that fits in its first tile is
an ordinary left fold. A scan's element in a later tile is f(the row's value before the tile,
the fold of the tile's piece up to the element). The tiles are what work-items share out on a
device, so the order is part of a program's meaning, fixed here, not a setting.
"""
ROW_TILE = 256
