// A synchronous write as a promise, for the writers whose backend is this
// server's own file (LocalWriter, LocalAuthWriter): the write runs at the
// call, before the promise is returned, so callers that do not wait still see
// their writes in call order; a throw becomes the promise's rejection.
export function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}
