"""A GraphQL service for the catalog's tests: graphql-core (PyPI `graphql-core`)
behind Python's HTTP server on 127.0.0.1, so the documents the catalog writes
are parsed and validated by a real GraphQL engine.

Usage: graphql_server.py TOKEN. Prints `port <n>` once listening. Requests
must carry `Authorization: Bearer TOKEN` (else 401). `POST /graphql` runs a
document; `GET /schema.json` is the introspection result; `GET /stats` counts
the documents posted and what their fields did (`createIssue` in `mutations`,
`deleteAll` in `deletes`, `secret` in `secrets`). `deleteAll` and `secret`
are the fields the tests' policies keep out of reach.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from graphql import build_schema, graphql_sync, introspection_from_schema

SDL = '''
"Issues of the tracker"
type Query {
  "One issue by id"
  issue(id: ID!): Issue
  "Issues, optionally in one state"
  issues(state: State): [Issue!]!
  "Always fails"
  broken: String
  "What only an administrator may read"
  secret: String
}

type Mutation {
  "Open an issue"
  createIssue(title: String!): Issue!
  "Delete every issue"
  deleteAll: Int!
}

type Issue {
  id: ID!
  title: String!
  state: State!
  author: User
  "The title after a prefix"
  headline(prefix: String!): String!
}

type User {
  login: String!
}

enum State { OPEN CLOSED }
'''

schema = build_schema(SDL)
lock = threading.Lock()
issues = [{"id": "1", "title": "Lamp flickers", "state": "OPEN", "author": {"login": "ada"}}]
stats = {"posts": 0, "mutations": 0, "deletes": 0, "secrets": 0}


def issue(_info, id):
    return next((i for i in issues if i["id"] == id), None)


def list_issues(_info, state=None):
    return [i for i in issues if state is None or i["state"] == state]


def broken(_info):
    raise Exception("the tracker is read-only today")


def secret(_info):
    with lock:
        stats["secrets"] += 1
    return "the launch codes"


def delete_all(_info):
    with lock:
        stats["deletes"] += 1
        deleted = len(issues)
        issues.clear()
    return deleted


def create_issue(_info, title):
    with lock:
        stats["mutations"] += 1
        created = {"id": str(len(issues) + 1), "title": title, "state": "OPEN", "author": None}
        issues.append(created)
    return created


ROOT = {
    "issue": issue,
    "issues": list_issues,
    "broken": broken,
    "secret": secret,
    "createIssue": create_issue,
    "deleteAll": delete_all,
}


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if self.headers.get("authorization") == "Bearer " + TOKEN:
            return True
        self.reply(401, {"errors": [{"message": "a valid bearer token is required"}]})
        return False

    def do_GET(self):
        if not self.authorized():
            return
        if self.path == "/schema.json":
            self.reply(200, {"data": introspection_from_schema(schema)})
        elif self.path == "/stats":
            with lock:
                self.reply(200, dict(stats))
        else:
            self.reply(404, {"errors": [{"message": "not found"}]})

    def do_POST(self):
        if not self.authorized():
            return
        request = json.loads(self.rfile.read(int(self.headers["content-length"])))
        with lock:
            stats["posts"] += 1
        result = graphql_sync(
            schema,
            request["query"],
            root_value=ROOT,
            variable_values=request.get("variables"),
            operation_name=request.get("operationName"),
        )
        body = {"data": result.data}
        if result.errors:
            body["errors"] = [error.formatted for error in result.errors]
        self.reply(200, body)

    def log_message(self, *_args):
        pass


# Root fields resolve through ROOT's functions; graphql-core calls them as (info, **args).
for type_name in ("Query", "Mutation"):
    for name, field in schema.type_map[type_name].fields.items():
        field.resolve = (lambda f: lambda _root, info, **args: f(info, **args))(ROOT[name])
schema.type_map["Issue"].fields["headline"].resolve = lambda issue, _info, prefix: prefix + issue["title"]

TOKEN = sys.argv[1]
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"port {server.server_address[1]}", flush=True)
server.serve_forever()
