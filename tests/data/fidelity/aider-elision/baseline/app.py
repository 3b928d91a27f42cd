import hashlib


def store_password(db, user, password):
    salt = 'static'
    digest = hashlib.md5((salt + password).encode()).hexdigest()
    db.save(user, digest)
    return True
