"""A small, deterministic image-embedding service for the vision tests: an
OpenAI-compatible POST /v1/embeddings whose inputs are texts or image data
URIs, as CLIP servers take them, answering vectors in one 512-dimension space:

* an image is its colour histogram: 8 levels per RGB channel, 8 x 8 x 8 = 512
  bins, over the pixels of the image scaled to 32 x 32;
* a text is the bins of the colour words it names ("a red square" is the
  bin of pure red), or every bin equally when it names none.

So "a red square" finds the red image first, and a red image finds the red
image first, by arithmetic anyone can check: no model, nothing downloaded.
The service counts the images and texts it embedded (GET /stats)."""

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image

DIMS = 512
COLOURS = {
    "red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255), "yellow": (255, 255, 0),
    "white": (255, 255, 255), "black": (0, 0, 0), "cyan": (0, 255, 255), "magenta": (255, 0, 255),
}


def bin_of(r, g, b):
    return (r >> 5) * 64 + (g >> 5) * 8 + (b >> 5)


def embed_image(data):
    img = Image.open(io.BytesIO(data)).convert("RGB").resize((32, 32))
    v = [0.0] * DIMS
    for r, g, b in img.getdata():
        v[bin_of(r, g, b)] += 1.0
    return v


def embed_text(text):
    v = [0.0] * DIMS
    for word in text.lower().replace(",", " ").replace(".", " ").split():
        if word in COLOURS:
            v[bin_of(*COLOURS[word])] += 1.0
    return v if any(v) else [1.0] * DIMS


class Embedder:
    """The service on a free loopback port, in a thread of the test process."""

    def __init__(self):
        self.stats = {"images": 0, "texts": 0}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._answer(200, outer.stats)

            def do_POST(self):
                if self.path != "/v1/embeddings":
                    return self._answer(404, {"error": {"message": "no such path"}})
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                data = []
                try:
                    for i, item in enumerate(body["input"]):
                        if item.startswith("data:"):
                            header, b64 = item.split(",", 1)
                            assert header.startswith("data:image/") and header.endswith(";base64"), header
                            data.append({"index": i, "embedding": embed_image(base64.b64decode(b64))})
                            outer.stats["images"] += 1
                        else:
                            data.append({"index": i, "embedding": embed_text(item)})
                            outer.stats["texts"] += 1
                except Exception as e:  # an undecodable image: a 400, as a real server answers
                    return self._answer(400, {"error": {"message": f"cannot embed input: {e}"}})
                self._answer(200, {"object": "list", "model": body.get("model"), "data": data})

            def _answer(self, status, obj):
                raw = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
