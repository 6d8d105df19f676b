// A wasi:http/proxy component in JavaScript (componentize-js), for the
// component route tests: every request is answered 200 with
// "javascript <path> <body length>".
import {
  Fields,
  OutgoingBody,
  OutgoingResponse,
  ResponseOutparam,
} from 'wasi:http/types@0.2.12';

function readBody(request) {
  const stream = request.consume().stream();
  let length = 0;
  for (;;) {
    let chunk;
    try {
      chunk = stream.blockingRead(65536n);
    } catch (e) {
      break;
    }
    length += chunk.length;
  }
  return length;
}

export const incomingHandler = {
  handle(request, outparam) {
    const length = readBody(request);
    const headers = Fields.fromList([['content-type', new TextEncoder().encode('text/plain')]]);
    const response = new OutgoingResponse(headers);
    response.setStatusCode(200);
    const body = response.body();
    ResponseOutparam.set(outparam, { tag: 'ok', val: response });
    const stream = body.write();
    const text = `javascript ${request.pathWithQuery()} ${length}\n`;
    stream.blockingWriteAndFlush(new TextEncoder().encode(text));
    stream[Symbol.dispose]();
    OutgoingBody.finish(body, undefined);
  },
};
