"""What the stages assume when nothing says otherwise, defined once."""

# The work-group size, FCL's #BlockSize: the original's default, and a multiple of every GPU's
# warp (32) or wavefront (64).
BLOCK_SIZE = 256
# The warp size, FCL's #WarpSize: NVIDIA's warp. A program's meaning never depends on the
# device's own sub-group size; this is what it reads.
WARP_SIZE = 32
