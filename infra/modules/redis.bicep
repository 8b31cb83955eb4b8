// Azure Managed Redis (redisEnterprise) for the queues, the token governor and the summary store. TLS on port
// 10000, access keys off: the app's managed identity gets the `default` access policy and signs in with Entra ID.

@description('Azure region for the cache.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Cache name; also the first label of its host name.')
param name string

@description('Azure Managed Redis SKU, e.g. Balanced_B0 (dev) or Balanced_B5 (production).')
param skuName string

@description('Append-only-file persistence, so queued jobs and governor state survive a node restart.')
param persistenceEnabled bool

@description('Object (principal) id of the identity that gets the default access policy.')
param appPrincipalId string

@description('Enabled, or Disabled when the cache is reached through its private endpoint only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string

resource cluster 'Microsoft.Cache/redisEnterprise@2025-07-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: skuName
  }
  properties: {
    minimumTlsVersion: '1.2'
    // Required at 2025-07-01 (Bicep type index, Microsoft.Cache/redisEnterprise ClusterCreateProperties:
    // "publicNetworkAccess: 'Disabled' | 'Enabled' (Required) ... Only 'Enabled' or 'Disabled' can be set").
    publicNetworkAccess: publicNetworkAccess
  }
}

resource database 'Microsoft.Cache/redisEnterprise/databases@2025-07-01' = {
  parent: cluster
  name: 'default'
  properties: {
    clientProtocol: 'Encrypted'
    port: 10000
    // One endpoint for a non-cluster-aware client; Lua scripts keep their keys in one hash slot.
    clusteringPolicy: 'EnterpriseCluster'
    // Queues and governor windows must never be evicted to make room.
    evictionPolicy: 'NoEviction'
    accessKeysAuthentication: 'Disabled'
    persistence: persistenceEnabled
      ? {
          aofEnabled: true
          aofFrequency: '1s'
        }
      : {
          aofEnabled: false
          rdbEnabled: false
        }
  }
}

resource appAccess 'Microsoft.Cache/redisEnterprise/databases/accessPolicyAssignments@2025-07-01' = {
  parent: database
  name: 'stormgateapp'
  properties: {
    accessPolicyName: 'default'
    user: {
      objectId: appPrincipalId
    }
  }
}

output id string = cluster.id
output hostName string = cluster.properties.hostName
output url string = 'rediss://${cluster.properties.hostName}:${database.properties.port}'
