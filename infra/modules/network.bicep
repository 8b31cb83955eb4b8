// Private networking (main.bicep's `privateNetworking`): a virtual network whose `app` subnet the function app
// integrates with (outbound) and whose `endpoints` subnet holds a private endpoint for every data service the app
// uses (storage blobs, queues and tables, Key Vault, Azure OpenAI, Azure Managed Redis), each with its private DNS
// zone linked to the network, so the services can turn public network access off. A NAT gateway gives the app's
// outbound traffic (Kafka brokers, ServiceNow) a fixed public address: route-all integration sends it through the
// network, where new subnets have no default outbound access.

@description('Azure region for the network resources.')
param location string

@description('Tags applied to every resource.')
param tags object

@description('Prefix for the network resource names.')
param namePrefix string

@description('Address space of the virtual network; the app subnet takes its first /24, the endpoints the second.')
param addressPrefix string

@description('Resource id of the Functions host storage account (blob, queue and table endpoints).')
param storageAccountId string

@description('Resource id of the Key Vault.')
param keyVaultId string

@description('Resource id of the Azure OpenAI account.')
param openAiAccountId string

@description('Resource id of the Azure Managed Redis cluster; empty when an existing Redis is used.')
param redisClusterId string

// Flex Consumption integrates with a subnet delegated to Microsoft.App/environments (Microsoft Learn, "Azure
// Functions networking options", Flex Consumption: "the subnet must be delegated to Microsoft.App/environments").
var appSubnetPrefix = cidrSubnet(addressPrefix, 24, 0)
var endpointsSubnetPrefix = cidrSubnet(addressPrefix, 24, 1)

// Private DNS zone and private-link group of each service (Microsoft Learn, "Azure Private Endpoint private DNS
// zone values").
var endpoints = concat(
  [
    {
      name: 'blob'
      serviceId: storageAccountId
      groupId: 'blob'
      zone: 'privatelink.blob.${environment().suffixes.storage}'
    }
    {
      name: 'queue'
      serviceId: storageAccountId
      groupId: 'queue'
      zone: 'privatelink.queue.${environment().suffixes.storage}'
    }
    {
      name: 'table'
      serviceId: storageAccountId
      groupId: 'table'
      zone: 'privatelink.table.${environment().suffixes.storage}'
    }
    {
      name: 'vault'
      serviceId: keyVaultId
      groupId: 'vault'
      zone: 'privatelink.vaultcore.azure.net'
    }
    {
      name: 'openai'
      serviceId: openAiAccountId
      groupId: 'account'
      zone: 'privatelink.openai.azure.com'
    }
  ],
  empty(redisClusterId)
    ? []
    : [
        {
          name: 'redis'
          serviceId: redisClusterId
          groupId: 'redisEnterprise'
          zone: 'privatelink.redis.azure.net'
        }
      ]
)

resource egressAddress 'Microsoft.Network/publicIPAddresses@2024-05-01' = {
  name: 'pip-${namePrefix}-egress'
  location: location
  tags: tags
  sku: {
    name: 'Standard'
  }
  properties: {
    publicIPAllocationMethod: 'Static'
  }
}

resource egress 'Microsoft.Network/natGateways@2024-05-01' = {
  name: 'ng-${namePrefix}'
  location: location
  tags: tags
  sku: {
    name: 'Standard'
  }
  properties: {
    publicIpAddresses: [
      {
        id: egressAddress.id
      }
    ]
  }
}

resource network 'Microsoft.Network/virtualNetworks@2024-05-01' = {
  name: 'vnet-${namePrefix}'
  location: location
  tags: tags
  properties: {
    addressSpace: {
      addressPrefixes: [
        addressPrefix
      ]
    }
    subnets: [
      {
        name: 'app'
        properties: {
          addressPrefix: appSubnetPrefix
          natGateway: {
            id: egress.id
          }
          delegations: [
            {
              name: 'flex-consumption'
              properties: {
                serviceName: 'Microsoft.App/environments'
              }
            }
          ]
        }
      }
      {
        name: 'endpoints'
        properties: {
          addressPrefix: endpointsSubnetPrefix
          privateEndpointNetworkPolicies: 'Disabled'
        }
      }
    ]
  }
}

resource zones 'Microsoft.Network/privateDnsZones@2024-06-01' = [
  for endpoint in endpoints: {
    name: endpoint.zone
    location: 'global'
    tags: tags
  }
]

resource zoneLinks 'Microsoft.Network/privateDnsZones/virtualNetworkLinks@2024-06-01' = [
  for (endpoint, i) in endpoints: {
    parent: zones[i]
    name: network.name
    location: 'global'
    tags: tags
    properties: {
      registrationEnabled: false
      virtualNetwork: {
        id: network.id
      }
    }
  }
]

resource privateEndpoints 'Microsoft.Network/privateEndpoints@2024-05-01' = [
  for endpoint in endpoints: {
    name: 'pe-${namePrefix}-${endpoint.name}'
    location: location
    tags: tags
    properties: {
      subnet: {
        id: '${network.id}/subnets/endpoints'
      }
      privateLinkServiceConnections: [
        {
          name: endpoint.name
          properties: {
            privateLinkServiceId: endpoint.serviceId
            groupIds: [
              endpoint.groupId
            ]
          }
        }
      ]
    }
  }
]

resource zoneGroups 'Microsoft.Network/privateEndpoints/privateDnsZoneGroups@2024-05-01' = [
  for (endpoint, i) in endpoints: {
    parent: privateEndpoints[i]
    name: 'default'
    properties: {
      privateDnsZoneConfigs: [
        {
          name: endpoint.name
          properties: {
            privateDnsZoneId: zones[i].id
          }
        }
      ]
    }
  }
]

output appSubnetId string = '${network.id}/subnets/app'
output egressAddress string = egressAddress.properties.ipAddress
