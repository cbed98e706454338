"""nbgrader's configuration for a course of FCL notebooks (tests/test_nbgrader.py grades one)."""
c = get_config()  # noqa: F821 - nbgrader's config loader provides get_config

c.CourseDirectory.course_id = "fcl-course"
# ClearSolutions replaces a cell's lines from one holding `BEGIN SOLUTION` to one holding `END
# SOLUTION` with the stub of the notebook's kernel language, and knows no stub for FCL. The
# markers are written as FCL comments, `-- BEGIN SOLUTION`, so the teacher's notebook runs too.
c.ClearSolutions.code_stub = {"fcl": "-- YOUR CODE HERE"}
# A cell's first OpenCL build can take a while on a busy CPU; nbgrader's default is 30 s.
c.Execute.timeout = 300
