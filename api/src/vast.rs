//! VAST 4.0: building our video ad documents and injecting our tracking into any
//! VAST 4.0 document. Owned by the VAST work; filled in there.
