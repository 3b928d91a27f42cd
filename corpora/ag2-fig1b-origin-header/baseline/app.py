import json

import tornado.web

ITEMS = {1: {"id": 1, "name": "alpha"}, 2: {"id": 2, "name": "beta"}}


class ItemHandler(tornado.web.RequestHandler):
    """Serves /api/items/<id> to the dashboard at https://dashboard.example.com."""

    def set_default_headers(self):
        origin = self.request.headers.get("Origin")
        self.set_header("Access-Control-Allow-Origin", origin or "*")
        self.set_header("Access-Control-Allow-Credentials", "true")

    def get(self, item_id):
        item = ITEMS.get(item_id)
        self.write(str(item))


def make_app():
    return tornado.web.Application([
        (r"/api/items", ItemHandler),
    ])
