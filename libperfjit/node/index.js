// SPDX-License-Identifier: LGPL-2.1-or-later
// perfjit-node: loading it starts it (see addon.cpp for $PERFJIT_NODE).
// stats() prints its counters to stderr.
'use strict';
module.exports = require('./perfjit-node.node');
