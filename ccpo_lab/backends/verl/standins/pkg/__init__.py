"""Stand-in for ``pkg_resources`` alone (see ``pkg_resources.py``); a folder of its own so that
the torchvision stand-in beside it is never put on ``sys.path`` with it."""
