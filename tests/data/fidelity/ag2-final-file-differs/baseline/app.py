import random


def make_token():
    return str(random.random())
