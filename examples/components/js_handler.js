// An HTTP handler in JavaScript: a wasi:http/proxy component
// (componentize-js). Every request gets a fresh instance.
import {
  Fields,
  OutgoingBody,
  OutgoingResponse,
  ResponseOutparam,
} from 'wasi:http/types@0.2.12';

export const incomingHandler = {
  handle(request, outparam) {
    const headers = Fields.fromList([['content-type', new TextEncoder().encode('text/plain')]]);
    const response = new OutgoingResponse(headers);
    const body = response.body();
    ResponseOutparam.set(outparam, { tag: 'ok', val: response });
    const stream = body.write();
    const text = `JavaScript got ${request.pathWithQuery()}\n`;
    stream.blockingWriteAndFlush(new TextEncoder().encode(text));
    stream[Symbol.dispose]();
    OutgoingBody.finish(body, undefined);
  },
};
