"""An HTTP handler in Python: a wasi:http/proxy component (componentize-py).
Every request gets a fresh instance; it answers with what it was asked."""
from componentize_py_types import Ok
from wit_world import exports
from wit_world.imports.types import (
    Fields,
    IncomingRequest,
    OutgoingBody,
    OutgoingResponse,
    ResponseOutparam,
)


def body_of(request):
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


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request: IncomingRequest, out: ResponseOutparam) -> None:
        received = body_of(request)
        text = "Python got %s with %d bytes\n" % (request.path_with_query(), len(received))
        response = OutgoingResponse(Fields.from_list([("content-type", b"text/plain")]))
        body = response.body()
        ResponseOutparam.set(out, Ok(response))
        stream = body.write()
        stream.blocking_write_and_flush(text.encode())
        stream.__exit__(None, None, None)
        OutgoingBody.finish(body, None)
