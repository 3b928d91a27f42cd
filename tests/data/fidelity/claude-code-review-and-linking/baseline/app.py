import os

BASE_DIR = '/srv/files'


def read_file(name):
    path = os.path.join(BASE_DIR, name)
    with open(path) as f:
        return f.read()
