"""A wasi:http/proxy component in Python (componentize-py), for the
component route tests. By the last segment of its path (a route may
take it under a prefix: /py/echo is /echo):

  /echo            200, "python <method> <path and query> <body length> <body>"
  /big?n=N         200, a body of N bytes ("x" repeated)
  /trap            raises: the handler traps (500)
  /spin            loops for ever (killed at its CPU limit: 503)
  /none            returns without setting a response (500)
  /fetch?url=URL   fetches URL with wasi:http/outgoing-handler and
                   answers with its status and body, or the error
  /count           200, "count N": the requests this instance has served
                   on /count (1 for a fresh instance per request; 1, 2, 3
                   … for a long-lived one, a component servlet)
  /sleep?ms=N      waits N ms on the monotonic clock, then 200 "slept"
"""
from urllib.parse import parse_qs, urlparse

from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import monotonic_clock, outgoing_handler, poll
from wit_world.imports.types import (
    Fields,
    IncomingRequest,
    Method_Get,
    OutgoingBody,
    OutgoingRequest,
    OutgoingResponse,
    ResponseOutparam,
    Scheme_Http,
)


def read_body(request):
    incoming = request.consume()
    stream = incoming.stream()
    data = bytearray()
    while True:
        try:
            data += stream.blocking_read(65536)
        except Exception:
            break
    # A resource goes before the one it came from.
    stream.__exit__(None, None, None)
    incoming.__exit__(None, None, None)
    return bytes(data)


def respond(out, status, data):
    response = OutgoingResponse(Fields.from_list([("content-type", b"text/plain")]))
    response.set_status_code(status)
    body = response.body()
    ResponseOutparam.set(out, Ok(response))
    stream = body.write()
    for at in range(0, len(data), 4096):
        stream.blocking_write_and_flush(data[at:at + 4096])
    stream.__exit__(None, None, None)
    OutgoingBody.finish(body, None)


def fetch(url):
    u = urlparse(url)
    request = OutgoingRequest(Fields())
    request.set_method(Method_Get())
    request.set_scheme(Scheme_Http())
    request.set_authority(u.netloc)
    request.set_path_with_query(u.path or "/")
    future = outgoing_handler.handle(request, None)
    while True:
        got = future.get()
        if got is not None:
            break
        poll.poll([future.subscribe()])
    result = got.value
    if isinstance(result, Err):
        future.__exit__(None, None, None)
        return b"error " + repr(result.value).encode()
    response = result.value
    status = response.status()
    incoming = response.consume()
    stream = incoming.stream()
    data = bytearray()
    while True:
        try:
            data += stream.blocking_read(65536)
        except Exception:
            break
    # Children before their parents.
    for resource in (stream, incoming, response, future):
        resource.__exit__(None, None, None)
    return b"fetched %d %s" % (status, bytes(data))


COUNT = 0


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request: IncomingRequest, out: ResponseOutparam) -> None:
        target = urlparse(request.path_with_query() or "/")
        query = parse_qs(target.query)
        path = "/" + target.path.rsplit("/", 1)[-1]
        if path == "/echo":
            body = read_body(request)
            method = type(request.method()).__name__.split("_")[-1].upper()
            head = "python %s %s %d " % (method, request.path_with_query(), len(body))
            respond(out, 200, head.encode() + body)
        elif path == "/big":
            respond(out, 200, b"x" * int(query["n"][0]))
        elif path == "/trap":
            raise RuntimeError("the handler failed on purpose")
        elif path == "/spin":
            while True:
                pass
        elif path == "/none":
            return
        elif path == "/count":
            global COUNT
            COUNT += 1
            respond(out, 200, b"count %d" % COUNT)
        elif path == "/sleep":
            ms = int(query["ms"][0])
            poll.poll([monotonic_clock.subscribe_duration(ms * 1_000_000)])
            respond(out, 200, b"slept")
        elif path == "/fetch":
            respond(out, 200, fetch(query["url"][0]))
        else:
            respond(out, 404, b"no such path\n")
