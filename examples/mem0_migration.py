"""From Mem0 to engram: the same calls, the same result shapes.

    ENGRAM_URL=http://localhost:8080 ENGRAM_TOKEN=<a platform token> python examples/mem0_migration.py
"""

import os

# before: from mem0 import Memory; m = Memory()
from pg_engram.mem0 import Memory

m = Memory(os.environ["ENGRAM_URL"], os.environ["ENGRAM_TOKEN"])

messages = [
    {"role": "user", "content": "I'm planning to watch a movie tonight. Any recommendations?"},
    {"role": "assistant", "content": "How about thriller movies? They can be quite engaging."},
    {"role": "user", "content": "I'm not a big fan of thriller movies but I love sci-fi movies."},
]
print(m.add(messages, user_id="alice", metadata={"category": "movies"}))
print(m.search("What kind of movies does Alice like?", filters={"user_id": "alice"}))
print(m.get_all(filters={"user_id": "alice"}))
first = m.get_all(user_id="alice")["results"][0]
m.update(first["id"], "Loves sci-fi movies, especially space operas", user_id="alice")  # engram: name the user
print(m.history(first["id"], user_id="alice"))
m.delete_all(user_id="alice")
