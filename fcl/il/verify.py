"""TEMPORARY"""
def verify(stage, stmts):
    pass
