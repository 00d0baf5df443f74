//! A lean HTTP/1.1 client connection (work in progress).
