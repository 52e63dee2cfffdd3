package dynamostore

// KeepWindow is keepWindow, for the tests of package dynamostore_test.
const KeepWindow = keepWindow
