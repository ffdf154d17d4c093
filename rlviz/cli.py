def main(argv=None):
    raise SystemExit("rlviz CLI: not yet wired")
