// The Functions host storage account: host state (blobs, tables), the durable hand-off queues from `dispatch` to
// the tier functions (with their poison queues), and the deployment package container for Flex Consumption.
// Everything reaches it with the managed identity: shared keys are off.

@description('Azure region for the storage account.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Storage account name (3-24 lowercase letters and digits).')
@minLength(3)
@maxLength(24)
param name string

@description('Redundancy of the account.')
@allowed([
  'Standard_LRS'
  'Standard_ZRS'
])
param skuName string

@description('Blob container that receives the Flex Consumption deployment package.')
param deploymentContainerName string

@description('Queues fed by dispatch and consumed by the tier functions.')
param workQueueNames array

@description('Enabled, or Disabled when the account is reached through its private endpoints only.')
@allowed([
  'Enabled'
  'Disabled'
])
param publicNetworkAccess string

resource account 'Microsoft.Storage/storageAccounts@2024-01-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: skuName
  }
  properties: {
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    publicNetworkAccess: publicNetworkAccess
    networkAcls: {
      defaultAction: publicNetworkAccess == 'Enabled' ? 'Allow' : 'Deny'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2024-01-01' = {
  parent: account
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2024-01-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2024-01-01' = {
  parent: account
  name: 'default'
}

// The host moves a message to `<queue>-poison` after maxDequeueCount failures; creating the poison queues up
// front lets alerts and the dead-letter tooling point at them before the first failure.
resource workQueues 'Microsoft.Storage/storageAccounts/queueServices/queues@2024-01-01' = [
  for queueName in concat(workQueueNames, map(workQueueNames, q => '${q}-poison')): {
    parent: queueService
    name: queueName
  }
]

output name string = account.name
output id string = account.id
output blobEndpoint string = account.properties.primaryEndpoints.blob
output deploymentContainerUrl string = '${account.properties.primaryEndpoints.blob}${deploymentContainer.name}'
