"""The common library of the order polling BFF: config, wire types, web plumbing, clients."""
