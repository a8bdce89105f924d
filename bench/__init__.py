"""specd.bench: every measurement of specd in one place, imported by the command line (`specd
bench`, `bench-daemon`, `replay`, `stress`) and nothing else of the runtime: the runtime packages
hold only what runs in an editor's path.
"""
