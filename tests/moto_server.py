"""moto's DynamoDB/Scheduler server for the tests, one request at a time.

Real DynamoDB makes every conditional write and transaction atomic. moto's own
threaded server checks a transaction's conditions and applies its writes
without a lock, so two racing claims can both "win" there. Serialising the
requests restores the guarantee the store relies on; keep-alive still works.

Usage: python3 moto_server.py PORT
"""

import sys
import threading

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()


def serialised(environ, start_response):
    with lock:
        return list(app(environ, start_response))


if __name__ == "__main__":
    run_simple("127.0.0.1", int(sys.argv[1]), serialised, threaded=True)
